"""An imported or stored program JSON never chooses where the LM cache lives, nor unbounded
LM settings: the import, the stored row and the worker's load all sanitise it."""

from __future__ import annotations

import copy
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.training.conftest import executed_run
from training.models import Program
from training.programs.programs import model_nodes, parse_import, sanitize_engine_json

pytestmark = pytest.mark.django_db(transaction=True)


def _language_model_configs(document):
    """Every serialised language model config in an engine document."""
    return [node["config"] for kind, node in model_nodes(document) if kind == "language_model"]


def _hostile(document, cache):
    document = copy.deepcopy(document)
    configs = _language_model_configs(document)
    assert configs, "the fixture program has a language model"
    for config in configs:
        config.update(cache=cache, timeout=None, retries=1000, max_concurrency=10_000)
    return document


def test_import_with_a_disk_cache_path_creates_nothing_and_stores_cache_false(
    client_user, user, program, tmp_path
):
    target = tmp_path / "x" / "nested"
    raw = json.dumps(_hostile(program.engine_json, f"disk:{target}")).encode()

    document, _ = parse_import(raw)
    assert not target.exists()
    (config,) = _language_model_configs(document)
    assert config["cache"] is False
    assert config["timeout"] == 600.0 and config["retries"] == 10
    assert config["max_concurrency"] == 32

    upload = SimpleUploadedFile("evil.json", raw, content_type="application/json")
    response = client_user.post(reverse("training:program-import"), {"file": upload})
    assert response.status_code == 302
    imported = Program.objects.get(owner=user, source=Program.SOURCE_IMPORT)
    assert [c["cache"] for c in _language_model_configs(imported.engine_json)] == [False]
    assert not target.exists()


def test_a_redis_cache_url_is_dropped_too():
    document = {
        "judge": {
            "class_name": "synalinks>LanguageModel",
            "config": {"model": "openai/x", "cache": "redis://attacker:6379/0"},
        },
        "embedding_model": {
            "class_name": "synalinks>EmbeddingModel",
            "config": {"model": "openai/e", "retries": -1, "max_concurrency": 0},
        },
    }
    clean = sanitize_engine_json(document)
    assert clean["judge"]["config"]["cache"] is False
    assert clean["judge"]["config"]["timeout"] == 600.0  # absent: not unlimited either
    assert clean["embedding_model"]["config"] == {
        "model": "openai/e",
        "retries": 0,
        "max_concurrency": 1,
    }
    assert "cache" not in clean["embedding_model"]["config"]  # EmbeddingModel takes none
    assert document["judge"]["config"]["cache"] == "redis://attacker:6379/0"  # a copy


def test_worker_ignores_a_cache_path_in_stored_program_json(user, program, demo_dataset, tmp_path):
    """A program imported before the check existed: the worker sanitises at load too."""
    target = tmp_path / "worker" / "nested"
    Program.objects.filter(pk=program.pk).update(
        engine_json=_hostile(program.engine_json, f"disk:{target}")
    )
    run = executed_run(user, program, demo_dataset)
    assert not target.exists()
    assert [c["cache"] for c in _language_model_configs(run.trained_program_json)] == [False]
    assert [c["cache"] for c in _language_model_configs(run.checkpoint_json)] == [False]
