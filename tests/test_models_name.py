"""A network's name is the one asked for, whatever its options."""

from __future__ import annotations

import pytest

from climnb.models import build_model, model_summary
from climnb.models.presets import get_config
from climnb.models.tiramisu import build_tiramisu


@pytest.mark.parametrize(
    "name, expected", [("tiramisu", "tiramisu"), ("deeplab", "deeplabv3plus")], ids=str
)
def test_build_model_names_the_network(name, expected):
    model = build_model(name, (32, 48, 16), preset="toy")
    assert model.name == expected
    assert f'Model: "{expected}"' in model_summary(model)


def test_tiramisu_keeps_the_name_it_is_given():
    config = get_config("tiramisu", "toy")
    assert build_tiramisu((32, 48, 16), 3, config, name="mine").name == "mine"
