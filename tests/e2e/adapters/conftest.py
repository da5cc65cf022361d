"""The contract runs: each scenario of ``support.cli_contract`` played once per CLI per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli_contract import Case, CliSpec, ContractRuns, Health, HealthCase, HealthOf, Run, RunOf


@pytest.fixture(scope="session")
def contract_runs(tmp_path_factory: pytest.TempPathFactory) -> ContractRuns:
    return ContractRuns(tmp_path_factory.mktemp("cli-contract"))


@pytest.fixture
def run_of(request: pytest.FixtureRequest, contract_runs: ContractRuns) -> RunOf:
    """``await run_of(spec, case)``: that CLI's run of that case (played now if no test asked for it yet).

    The real CLIs come from ``agent_clis`` (a skip where npm is missing); Cursor's fake needs none.
    """

    async def get(spec: CliSpec, case: Case) -> Run:
        clis: dict[str, Path] = request.getfixturevalue("agent_clis") if spec.needs_npm else {}
        return await contract_runs.get(spec, case, clis)

    return get


@pytest.fixture
def health_of(request: pytest.FixtureRequest, contract_runs: ContractRuns) -> HealthOf:
    """``await health_of(spec, case)``: that CLI's health check with its probe, against that model."""

    async def get(spec: CliSpec, case: HealthCase) -> Health:
        clis: dict[str, Path] = request.getfixturevalue("agent_clis") if spec.needs_npm else {}
        return await contract_runs.health(spec, case, clis)

    return get
