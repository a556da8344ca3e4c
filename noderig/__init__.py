"""noderig: one command from a bare GPU node to a serving SGLang endpoint, as a pyinfra deploy."""

__version__ = "0.1.0"
