"""What the tests that verify projects through the CLI share: the JSON record, its failing cases, a config."""

import json

# Only the project's own CASES: the generated edge cases (issue #9) have their own tests.
ONLY_CASES = "[verify]\ngenerated_cases = false\n"


def verify_json(cli, project, *extra):
    """`workbench verify --json` through the `cli` fixture: (exit code, the project's record)."""
    code, out, err = cli("verify", project, "--json", *extra)
    record = json.loads(out)
    assert record["exit_code"] == code
    return code, record["projects"][0]


def failing(record):
    return [c for c in record["cases"] if c["status"] in ("failed", "error")]
