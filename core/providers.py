"""Which LM providers have an API key in the environment (names only, never values)."""

import os

PROVIDER_KEYS = [
    ("OpenAI", "OPENAI_API_KEY"),
    ("Anthropic", "ANTHROPIC_API_KEY"),
    ("Google Gemini", "GEMINI_API_KEY"),
    ("Mistral", "MISTRAL_API_KEY"),
    ("Groq", "GROQ_API_KEY"),
    ("Cohere", "COHERE_API_KEY"),
    ("DeepSeek", "DEEPSEEK_API_KEY"),
    ("OpenRouter", "OPENROUTER_API_KEY"),
    ("Together AI", "TOGETHERAI_API_KEY"),
    ("xAI", "XAI_API_KEY"),
    ("Azure OpenAI", "AZURE_API_KEY"),
    ("Hugging Face", "HF_TOKEN"),
]


def configured_providers() -> list[dict]:
    return [
        {"provider": provider, "variable": var, "configured": bool(os.environ.get(var))}
        for provider, var in PROVIDER_KEYS
    ]
