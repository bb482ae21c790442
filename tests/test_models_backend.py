"""TensorFlow loaded through climnb: quiet, and nothing of the environment in any warning."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("tensorflow", reason="needs TensorFlow: pip install 'climnb[train]'")


def test_a_traced_loss_prints_nothing_of_the_environment(capfd, caplog, monkeypatch):
    """The loss calls import_tf() inside the traced step; AutoGraph once failed to convert the
    environment's ``setdefault`` there and printed every variable of the process."""
    from climnb.models.backend import import_tf
    from climnb.models.losses import weighted_cross_entropy

    tf = import_tf()
    monkeypatch.setenv("CLIMNB_TEST_SECRET", "do-not-print")
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)  # setdefault would act
    step = tf.function(lambda y, logits: weighted_cross_entropy(y, logits, [1.0, 2.0, 3.0]))
    loss = step(tf.zeros((1, 4, 4), tf.int32), tf.zeros((1, 4, 4, 3)))
    assert abs(float(loss) - 1.0986123) < 1e-5
    out, err = capfd.readouterr()
    said = out + err + caplog.text
    assert "do-not-print" not in said and "AutoGraph" not in said
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ  # loaded: the environment is left alone
