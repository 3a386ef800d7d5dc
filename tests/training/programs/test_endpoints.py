"""The api_base rules (training/programs/endpoints.py): pure rules, no Django, no network."""

import pytest

from training.programs.endpoints import EndpointRefused, check_api_base, check_provider


def test_no_api_base_is_the_providers_own_endpoint():
    check_api_base(None, saved=False, allow_private=False)
    check_api_base("  ", saved=False, allow_private=False)


@pytest.mark.parametrize(
    "api_base",
    ["https://proxy.example.com/v1", "http://93.184.215.14:8000/v1", "https://[2606:4700::1]/v1"],
)
def test_public_addresses_are_fine_typed_or_saved(api_base):
    check_api_base(api_base, saved=False, allow_private=False)
    check_api_base(api_base, saved=True, allow_private=False)


@pytest.mark.parametrize(
    "api_base",
    [
        "http://localhost:11434",
        "http://127.0.0.1:8080/v1",
        "http://[::1]:8000/v1",
        "http://10.1.2.3:8000/v1",
        "http://192.168.1.20:11434",
        "http://172.16.0.5/v1",
    ],
)
def test_loopback_and_private_addresses_only_for_a_saved_endpoint_when_allowed(api_base):
    check_api_base(api_base, saved=True, allow_private=True)
    with pytest.raises(EndpointRefused, match="save it as an endpoint"):
        check_api_base(api_base, saved=False, allow_private=True)
    with pytest.raises(EndpointRefused, match="TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS is off"):
        check_api_base(api_base, saved=True, allow_private=False)


@pytest.mark.parametrize(
    "api_base, reason",
    [
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[fe80::1]:80/v1", "link-local"),
        ("http://[::ffff:169.254.169.254]/", "link-local"),
        ("http://[fd00:ec2::254]/latest", "link-local"),
        ("http://metadata.google.internal/computeMetadata/v1", "metadata"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("gopher://localhost:11434", "only http:// and https://"),
        ("localhost:11434", "only http:// and https://"),
        ("http:///v1", "no host"),
        ("http://localhost:99999", "not a valid URL"),
    ],
)
def test_dangerous_endpoints_are_refused_even_when_private_ones_are_allowed(api_base, reason):
    with pytest.raises(EndpointRefused, match=reason):
        check_api_base(api_base, saved=True, allow_private=True)


def test_a_custom_api_base_needs_a_provider_the_guarded_client_carries():
    check_provider("hosted_vllm/qwen", "http://10.0.0.2:8000/v1")
    check_provider("anthropic/claude-3-5-haiku-latest", "")  # the provider's own endpoint
    with pytest.raises(EndpointRefused, match="use one of the prefixes"):
        check_provider("anthropic/claude-3-5-haiku-latest", "https://proxy.example.com")
