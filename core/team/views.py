"""The Team page (administrators only): members, add one, reset a password, deactivate."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.ids import as_id
from core.team import services


class MemberForm(UserCreationForm):
    """Username and a first password (typed twice), checked by Django's validators."""

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username",)


def _administrator(request) -> None:
    if not request.user.is_staff:
        raise Http404("No such page.")  # members do not learn that it exists


def _member(pk):
    member_id = as_id(pk)
    if member_id is None:
        raise Http404("No such member.")
    return get_object_or_404(get_user_model(), pk=member_id)


@require_GET
def team_page(request):
    _administrator(request)
    return render(request, "core/team.html", _context(MemberForm()))


@require_POST
def add_member(request):
    _administrator(request)
    form = MemberForm(request.POST)
    if not form.is_valid():
        return render(request, "core/team.html", _context(form), status=400)
    member = services.add_member(form.cleaned_data["username"], form.cleaned_data["password1"])
    messages.success(
        request,
        f"{member.get_username()} can log in now with the password you typed; their demo is ready.",
    )
    return redirect("team")


@require_POST
def reset_password(request, pk):
    _administrator(request)
    member = _member(pk)
    password = services.temporary_password()
    return _done(
        request,
        lambda: services.reset_password(request.user, member, password),
        f"New password for {member.get_username()}: {password} (shown once: hand it to them).",
    )


@require_POST
def set_active(request, pk):
    _administrator(request)
    member = _member(pk)
    active = request.POST.get("active") == "1"
    return _done(
        request,
        lambda: services.set_active(request.user, member, active),
        f"{member.get_username()} {'can log in again' if active else 'can no longer log in'}.",
    )


def _done(request, change, success: str):
    """Make ``change``; say ``success``, or why it cannot be done; back to the Team page."""
    try:
        change()
    except services.TeamError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, success)
    return redirect("team")


def _context(form) -> dict:
    members = get_user_model().objects.order_by("-is_staff", "username")
    return {"form": form, "members": members}
