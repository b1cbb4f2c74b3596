"""A decoder-only transformer: token and position embeddings, ``layers`` pre-norm blocks of
LayerNorm + causal SDPA attention (grouped-query when ``kv_heads < heads``) + MLP (GELU, or
SwiGLU), a final LayerNorm and the LM head (tied to the token embedding with ``tied``).

One file, two uses: ``benchmarks/run.py`` builds it on the meta device for the scale section
(GPT-2 small, 7 B and 70 B shapes), and ``benchmarks/suite.py`` writes it, whole, into
KernelBench-format problems (with ``get_inputs``/``get_init_inputs`` after it). So it imports
only torch.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads, kv_heads, mlp, swiglu):
        super().__init__()
        self.width, self.heads, self.kv_heads, self.mlp = width, heads, kv_heads, mlp
        self.swiglu = swiglu
        self.head_dim = width // heads
        self.ln1 = nn.LayerNorm(width)
        self.q = nn.Linear(width, width, bias=False)
        self.kv = nn.Linear(width, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(width, width, bias=False)
        self.ln2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, (2 if swiglu else 1) * mlp, bias=False)
        self.down = nn.Linear(mlp, width, bias=False)

    def forward(self, x):
        batch, length, _ = x.shape
        y = self.ln1(x)
        q = self.q(y).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        kv = self.kv(y).view(batch, length, 2, self.kv_heads, self.head_dim)
        k, v = kv.permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads
        )
        x = x + self.o(a.transpose(1, 2).reshape(batch, length, self.width))
        u = self.up(self.ln2(x))
        u = F.silu(u[..., : self.mlp]) * u[..., self.mlp :] if self.swiglu else F.gelu(u)
        return x + self.down(u)


class Model(nn.Module):
    def __init__(self, vocab, width, layers, heads, kv_heads, mlp, swiglu, tied, context):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(
            Block(width, heads, kv_heads, mlp, swiglu) for _ in range(layers)
        )
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        if tied:
            self.head.weight = self.tok.weight

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))
