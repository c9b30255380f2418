"""The meanings of the relative-strength readings, in words: what the results and the command
line print beside the numbers (stdlib only)."""

from __future__ import annotations

__all__ = ["strength_meanings"]


def strength_meanings(within_rounds) -> dict:
    """One line per relative-strength quantity of a name X's consensus (the readings of
    :mod:`normlab.calibration.prediction`, Supplementary Text "Characterizing Relative Strength")."""
    w = f"{within_rounds} rounds" if within_rounds else "the flip window"
    return {
        "width": "share of mixed starts (a fraction f = 1/8 .. 7/8 of the agents with a full memory of X, the rest "
                 "of the other name) from which X wins: 1 = from any mix, 0 = from none",
        "boundary": "the fraction f of X-agents above which X wins half the runs (width = 1 - boundary)",
        "pull": f"how well a consensus on X absorbs one agent committed to the other name: 1 - that name's share "
                f"of the uncommitted agents' answers over {w} (1 = absorbed)",
        "exploration": f"the other name's share of the agents' answers over {w} from a consensus on X with nobody "
                       "committed (0 = X never wavers)",
    }
