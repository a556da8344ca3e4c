"""pyinfra facts and operations for noderig: thin, fact-driven, one file per deploy step."""
