"""The form that saves an endpoint (Settings → Endpoints)."""

from __future__ import annotations

from django import forms

from training.models import Endpoint
from training.programs import saved_endpoints


class EndpointForm(forms.Form):
    name = forms.CharField(
        max_length=saved_endpoints.NAME_MAX,
        help_text="How programs name it (an exported program carries this name, never the key).",
    )
    url = forms.CharField(
        max_length=300,
        label="URL",
        help_text=(
            "The server's base URL: llama.cpp server http://localhost:8080/v1, vLLM "
            "http://localhost:8000/v1, Ollama http://localhost:11434."
        ),
    )
    key = forms.CharField(
        required=False,
        max_length=2000,
        label="Key (optional)",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Stored encrypted and never shown again. Server provider keys are never sent.",
    )
    structured_output = forms.ChoiceField(
        choices=Endpoint.STRUCTURED_OUTPUT_CHOICES,
        initial="json_object",
        label="Structured output",
        help_text="How answers are held to the program's fields on this server.",
    )
    shared = forms.BooleanField(required=False, label="For everyone (administrators)")

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        if user is None or not user.is_staff:
            del self.fields["shared"]

    def clean_url(self):
        try:
            return saved_endpoints.check_url(self.cleaned_data["url"])
        except saved_endpoints.EndpointError as exc:
            raise forms.ValidationError(str(exc)) from None

    def save(self):
        """The saved Endpoint; None with the error on the form when it cannot be saved."""
        data = self.cleaned_data
        try:
            return saved_endpoints.save(
                self.user,
                data["name"],
                data["url"],
                data.get("key") or "",
                shared=bool(data.get("shared")),
                structured_output=data["structured_output"],
            )
        except saved_endpoints.EndpointError as exc:
            self.add_error("name" if "named" in str(exc) else None, str(exc))
            return None
