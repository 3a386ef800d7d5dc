"""The serialization registry: registered names only, clear errors otherwise."""

import pytest

import training.engine as synalinks
from training.engine.saving import UnknownObjectError, deserialize, get_registered_object, serialize


@synalinks.saving.register_synalinks_serializable()
async def registered_fn(y_true, y_pred):
    return 1.0


@synalinks.saving.register_synalinks_serializable(package="tests")
class Thing:
    def __init__(self, size=1):
        self.size = size

    def get_config(self):
        return {"size": self.size}


def test_function_and_class_round_trip():
    assert serialize(registered_fn) == {"function": "Custom>registered_fn"}
    assert deserialize({"function": "Custom>registered_fn"}) is registered_fn
    data = serialize(Thing(size=3))
    assert data == {"class_name": "tests>Thing", "config": {"size": 3}}
    assert deserialize(data).size == 3


def test_unknown_name_is_refused_clearly():
    with pytest.raises(UnknownObjectError, match="register_synalinks_serializable"):
        deserialize({"class_name": "evil>os.system", "config": {}})
    with pytest.raises(UnknownObjectError):
        serialize(lambda a, b: 0)


def test_custom_objects_by_short_name():
    class Local:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    assert get_registered_object("Custom>Local", {"Local": Local}) is Local
