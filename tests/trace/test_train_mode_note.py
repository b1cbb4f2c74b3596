"""A model left in train mode (as a module is built) prices training-mode BatchNorm: the batch's
statistics and the running-statistics updates. The report says so (issue 38, item 11)."""

from __future__ import annotations

import torch.nn as nn

from conftest import meta
from torchroofline import analyze


def _convnet() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8))


def test_batchnorm_in_train_mode_is_named_with_the_way_out():
    model = _convnet()
    train = analyze(model, meta(2, 3, 16, 16))
    (note,) = [n for n in train.notes if "BatchNorm" in n]
    assert note.startswith("2 BatchNorm module(s) in train mode ('1', '4') are priced as training")
    assert "call model.eval()" in note
    evaluated = analyze(model.eval(), meta(2, 3, 16, 16))
    assert not any("BatchNorm" in n for n in evaluated.notes)
    # what the note warns of is real: train mode's running-statistics updates cost time
    assert train.sol_s > evaluated.sol_s


def test_no_note_for_a_training_step_or_a_model_without_batchnorm():
    model = _convnet()
    step = analyze(model, meta(2, 3, 16, 16), mode="train", optimizer="sgd")
    assert not any("in train mode" in n for n in step.notes)
    assert not any("in train mode" in n for n in analyze(nn.Linear(4, 4), meta(2, 4)).notes)


def test_dropout_in_train_mode_is_named_as_batchnorm_is():
    # a model left in train mode priced Dropout's random mask silently, as it did BatchNorm
    model = nn.Sequential(nn.Linear(64, 64), nn.Dropout(0.1), nn.Linear(64, 64), nn.Dropout(0.0))
    train = analyze(model, meta(32, 64))
    (note,) = [n for n in train.notes if "Dropout" in n]
    # the p = 0 Dropout draws no mask: only '1' is named
    assert note.startswith("1 Dropout module(s) in train mode ('1') are priced as training runs "
                           "them: a random mask drawn and applied; call model.eval()")
    evaluated = analyze(model.eval(), meta(32, 64))
    assert not any("in train mode" in n for n in evaluated.notes)
    # what the note warns of is real: the mask is drawn and applied by kernels that take time
    # (in registers: the bound, which needs no mask, is the same)
    assert train.eager_estimate_s > evaluated.eager_estimate_s
    assert train.sol_s == evaluated.sol_s
