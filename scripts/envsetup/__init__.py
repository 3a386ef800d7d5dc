"""The parts of ``scripts/setup_env.py`` that stand on their own.

``output`` prints the set-up's progress and phase times, ``sources`` hands pip's package
sources to uv, ``llama_build`` compiles the llama.cpp binding with Trainboard's flags into a
wheelhouse. They import nothing outside the standard library: set-up runs them with the
bootstrap Python, before ``.venv`` exists.
"""
