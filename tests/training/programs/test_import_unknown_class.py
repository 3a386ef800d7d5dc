"""A program import naming a class this server does not have says so in the user's terms, not "register it with @synalinks.saving.register_synalinks_serializable()"."""

from __future__ import annotations

import copy
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_an_unknown_class_is_named_with_what_the_server_lacks(client_user, program):
    document = copy.deepcopy(program.engine_json)
    document["graph"]["modules"][0]["class_name"] = "MyLab>RetrievalGenerator"
    upload = SimpleUploadedFile(
        "program.json", json.dumps(document).encode(), content_type="application/json"
    )
    response = client_user.post(reverse("training:program-import"), {"file": upload})
    assert response.status_code == 400
    html = response.content.decode()
    assert (
        "the file uses &#x27;RetrievalGenerator&#x27;, a class or function defined in the code "
        "that saved it, which this server does not have"
    ) in html
    assert "register_synalinks_serializable" not in html
