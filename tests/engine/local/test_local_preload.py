"""Worker start-up preload of the local models (``trainboard_local.preload``)."""

import pytest

from trainboard_local import minilm, preload, smollm2


def test_only_local_models_are_preloaded():
    assert preload.start_preload(["openai/gpt-4o-mini", "fake/scripted"]) is None
    assert preload.preload(["openai/gpt-4o-mini"]) == preload.state()
    assert "openai/gpt-4o-mini" not in preload.state()


def test_a_model_that_cannot_load_is_reported_not_raised(monkeypatch):
    def broken():
        raise smollm2.LocalModelError("no weights here")

    monkeypatch.setitem(preload.LOADERS, smollm2.MODEL_NAME, broken)
    monkeypatch.setattr(preload, "_states", {})
    states = preload.preload([smollm2.MODEL_NAME])
    assert states == {smollm2.MODEL_NAME: "failed: no weights here"}
    assert not preload.loading()


@pytest.mark.slow
def test_start_preload_loads_the_models_in_the_background():
    thread = preload.start_preload([smollm2.MODEL_NAME, minilm.MODEL_NAME])
    assert thread is not None and thread.daemon
    assert preload.wait(timeout=300)
    assert preload.state() == {smollm2.MODEL_NAME: "ready", minilm.MODEL_NAME: "ready"}
    assert smollm2.is_loaded() and minilm.is_loaded()
    assert preload.loaded(smollm2.MODEL_NAME) and not preload.loading()
    assert set(preload.seconds()) == {smollm2.MODEL_NAME, minilm.MODEL_NAME}


def test_the_preload_registers_the_local_provider_with_litellm(litellm, monkeypatch):
    import trainboard_local

    monkeypatch.setitem(preload.LOADERS, smollm2.MODEL_NAME, lambda: None)
    monkeypatch.setattr(preload, "_states", {})
    monkeypatch.setattr(preload, "_seconds", {})
    monkeypatch.setattr(trainboard_local, "_registered", False)
    monkeypatch.setattr(litellm, "custom_provider_map", [])
    preload.preload([smollm2.MODEL_NAME])
    assert trainboard_local._registered
    assert [item["provider"] for item in litellm.custom_provider_map] == [trainboard_local.PROVIDER]
