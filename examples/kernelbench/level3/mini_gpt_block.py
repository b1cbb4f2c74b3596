import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """One pre-norm GPT block (causal self-attention + MLP), GPT-2-small sizes."""

    def __init__(self, embed, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(embed)
        self.qkv = nn.Linear(embed, 3 * embed)
        self.proj = nn.Linear(embed, embed)
        self.ln2 = nn.LayerNorm(embed)
        self.fc = nn.Linear(embed, 4 * embed)
        self.out = nn.Linear(4 * embed, embed)

    def forward(self, x):
        batch, length, embed = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(embed, dim=2)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(batch, length, embed))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


def get_inputs():
    return [torch.randn(8, 1024, 768)]


def get_init_inputs():
    return [768, 12]
