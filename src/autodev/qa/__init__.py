"""QA gates run through one check runner: syntax, lint, build, test, secretscan (issue 4)."""
