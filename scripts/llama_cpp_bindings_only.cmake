# Included right after llama.cpp's own project() call when setup_env.py builds
# llama-cpp-python (CMAKE_PROJECT_llama.cpp_INCLUDE in CMAKE_ARGS).
#
# llama-cpp-python forces LLAMA_BUILD_COMMON on before it adds llama.cpp, but its Python
# bindings load only libllama and libggml*: the "common" library (command-line parsing, chat
# templates, HTTP downloads) serves llama.cpp's own programs, which are not built. Turning it
# off here, after that forced value and before llama.cpp reads it, skips about a third of
# the C++ compilation.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
