"""Compare's configuration table: a setting left null in one run and empty in the
other is no difference, the program version each run trained is a row of its own, and a
setting's long name may wrap only between its words."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.training.test_views import make_finished_run
from training.programs.program_versions import promote

pytestmark = pytest.mark.django_db


def rows_of(html: str) -> dict[str, tuple[bool, list[str]]]:
    table = html.split('id="compare-config"', 1)[1].split("</table>", 1)[0]
    rows = {}
    for cls, key, cells in re.findall(
        r'<tr class="([^"]*)"[^>]*><td><code>(.*?)</code></td>(.*?)</tr>', table
    ):
        name = key.replace("<wbr>", "")  # where a long name may wrap (the breakable filter)
        rows[name] = ("config-differs" in cls, re.findall(r"<td>(.*?)</td>", cells))
    return rows


def test_null_and_empty_are_one_unset_and_the_trained_version_is_shown(
    client_user, user, program, demo_dataset
):
    first = make_finished_run(user, program, demo_dataset)
    first.trained_program_json = program.engine_json
    first.save()
    version = promote(first)  # the program's version 2
    second = make_finished_run(user, program, demo_dataset, program_version=version)
    first.config["reward"]["in_mask"] = None
    second.config["reward"]["in_mask"] = []
    first.config["metrics_in_mask"] = ""
    second.config["metrics_in_mask"] = None
    first.config["budget"] = {}
    second.config.pop("budget", None)
    first.save()
    second.save()
    html = client_user.get(
        reverse("training:compare"), {"runs": [first.pk, second.pk]}
    ).content.decode()
    rows = rows_of(html)
    assert rows["program version"] == (True, ["version 1", "version 2"])
    assert rows["reward.in_mask"] == (False, ["—", "—"])
    assert rows["metrics_in_mask"] == (False, ["—", "—"])
    assert [key for key, (differs, _) in rows.items() if differs] == ["program version"]


def test_each_column_names_its_optimizer_and_what_differs(client_user, user, program, demo_dataset):
    first = make_finished_run(user, program, demo_dataset)
    second = make_finished_run(user, program, demo_dataset)
    first.config["epochs"], second.config["epochs"] = 1, 3
    first.config["seed"], second.config["seed"] = 1, 2
    first.save()
    second.save()
    html = client_user.get(
        reverse("training:compare"), {"runs": [first.pk, second.pk]}
    ).content.decode()
    headings = re.findall(r'<span class="muted compare-heading">([^<]*)</span>', html)
    optimizer = first.optimizer_name
    assert headings[:2] == [f"{optimizer} · epochs 1 · seed 1", f"{optimizer} · epochs 3 · seed 2"]


def test_a_setting_name_may_wrap_only_after_its_marks_and_stays_escaped():
    from training.templatetags.training_extras import breakable

    assert breakable("optimizer.params.k_nearest") == "optimizer.<wbr>params.<wbr>k_<wbr>nearest"
    assert breakable("<b>a/b") == "&lt;b&gt;a/<wbr>b"
