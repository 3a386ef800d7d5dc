"""An id no row can have (past a 64-bit column, or written in digits that are not ASCII)
answers like an id that is not the user's: a 404 where a page names a row, and no 500 (from
the database, PostgreSQL's "bigint out of range", or from ``int``) anywhere a request carries
one."""

from __future__ import annotations

import pytest
from django.urls import reverse

from core.ids import MAX_ID, as_id

HUGE = "99999999999999999999999"
SUPERSCRIPT = "\u00b2"  # "²": str.isdigit() says yes, int() refuses it

pytestmark = pytest.mark.django_db


def test_an_id_past_the_column_is_no_id():
    assert as_id(HUGE) is None and as_id(str(MAX_ID + 1)) is None
    assert as_id("0") is None and as_id("-3") is None and as_id("7a") is None
    assert as_id(str(MAX_ID)) == MAX_ID and as_id(" 12 ") == 12
    assert as_id(SUPERSCRIPT) is None and as_id("\u0661") is None  # "²", Arabic-Indic one


@pytest.mark.parametrize(
    "url",
    [
        f"/runs/?program={HUGE}",
        f"/runs/?dataset={HUGE}",
        f"/compare/?runs={HUGE}",
        f"/runs/?program={SUPERSCRIPT}",
        f"/compare/?runs={SUPERSCRIPT}",
        f"/runs/{HUGE}/",
        f"/programs/{HUGE}/",
        f"/datasets/{HUGE}/",
    ],
)
def test_a_page_naming_an_impossible_row_is_a_404(client_user, program, url):
    assert client_user.get(url).status_code == 404


def test_forms_opened_on_an_impossible_row_open_empty(client_user, program):
    response = client_user.get(reverse("training:run-create") + f"?program={HUGE}")
    assert response.status_code == 200
    assert f'<option value="{program.pk}" selected>' in response.content.decode()  # the newest
    response = client_user.get(reverse("training:program-create") + f"?dataset={HUGE}")
    assert response.status_code == 200
    query = f"?program={program.pk}&version={SUPERSCRIPT}"
    response = client_user.get(reverse("training:run-create") + query)
    assert response.status_code == 200
