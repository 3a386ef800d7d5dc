"""The api_base policy (training/programs/endpoints.py): pure rules, no Django, no network."""

import pytest

from training.programs.endpoints import EndpointRefused, check_api_base, parse_allowed

ALLOWED = parse_allowed("http://localhost:11434, https://proxy.example.com/v1")


def test_no_api_base_is_the_providers_own_endpoint():
    check_api_base(None, ())
    check_api_base("  ", ())


@pytest.mark.parametrize(
    "api_base",
    [
        "http://localhost:11434",
        "http://LOCALHOST:11434/",
        "http://localhost:11434/api",
        "https://proxy.example.com/v1",
        "https://proxy.example.com:443/v1/chat",
    ],
)
def test_listed_endpoints_are_allowed(api_base):
    check_api_base(api_base, ALLOWED)


@pytest.mark.parametrize(
    "api_base",
    [
        "http://127.0.0.1:8080/v1",  # not listed
        "http://localhost:11435",  # another port
        "https://localhost:11434",  # another scheme
        "https://proxy.example.com/v10",  # a path that only starts like a listed one
        "https://proxy.example.com.attacker.net/v1",
    ],
)
def test_unlisted_endpoints_are_refused_naming_the_setting(api_base):
    with pytest.raises(EndpointRefused, match="TRAINBOARD_ALLOWED_API_BASES"):
        check_api_base(api_base, ALLOWED)


@pytest.mark.parametrize(
    "api_base, reason",
    [
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[fe80::1]:80/v1", "link-local"),
        ("http://[::ffff:169.254.169.254]/", "link-local"),
        ("http://metadata.google.internal/computeMetadata/v1", "metadata"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("gopher://localhost:11434", "only http:// and https://"),
        ("localhost:11434", "only http:// and https://"),
        ("http:///v1", "no host"),
        ("http://localhost:99999", "not a valid URL"),
    ],
)
def test_dangerous_endpoints_are_refused_even_when_listed(api_base, reason):
    with pytest.raises(EndpointRefused, match=reason):
        check_api_base(api_base, parse_allowed([api_base]) if reason == "link-local" else ())
