"""Plan and implementation tournaments: critic, revision, synthesis and Borda-counted judges."""

from autodev.tournament.artifacts import (
    TournamentArtifacts,
    TournamentNotFoundError,
    list_tournaments,
    load_history,
    resolve_tournament_dir,
)
from autodev.tournament.borda import BordaOutcome, borda_scores, decide, demote
from autodev.tournament.engine import (
    CANDIDATES,
    Candidate,
    ContentHandler,
    EngineSettings,
    JudgeRecord,
    PassRecord,
    RoleCall,
    RoleClient,
    RoleReply,
    TournamentEngine,
    TournamentKind,
    TournamentResult,
)

__all__ = [
    "CANDIDATES",
    "BordaOutcome",
    "Candidate",
    "ContentHandler",
    "EngineSettings",
    "JudgeRecord",
    "PassRecord",
    "RoleCall",
    "RoleClient",
    "RoleReply",
    "TournamentArtifacts",
    "TournamentEngine",
    "TournamentKind",
    "TournamentNotFoundError",
    "TournamentResult",
    "borda_scores",
    "decide",
    "demote",
    "list_tournaments",
    "load_history",
    "resolve_tournament_dir",
]
