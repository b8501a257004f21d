"""The record every integrity check returns: one broken rule, where, and why."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cuda_agent.harness.integrity.rules import RULES


class Violation(BaseModel):
    """One integrity rule broken by a candidate, phrased so the agent can act on it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: str = Field(description="Rule id 'T<n>.<layer>.<what>' from RULES; T<n> is the THREATS.md class.")
    message: str = Field(description="What was found, what is allowed instead.")
    file: str | None = Field(None, description="Workspace-relative file (or the .so path) where it was found.")
    line: int | None = Field(None, description="1-based line in that file, when known.")

    @field_validator("rule")
    @classmethod
    def _known_rule(cls, value: str) -> str:
        if value not in RULES:
            raise ValueError(f"unknown integrity rule {value!r}; valid rules are listed in integrity.rules.RULES")
        return value

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return f"[{self.rule}] {where}{self.message}"


def format_violations(violations: list[Violation], limit: int = 20) -> str:
    """A rejection text naming every rule broken (first ``limit``), one per line."""
    lines = [str(v) for v in violations[:limit]]
    if len(violations) > limit:
        lines.append(f"... and {len(violations) - limit} more")
    return "\n".join(lines)


def dedupe(violations: list[Violation]) -> list[Violation]:
    """Drop repeats of the same (rule, file, line), keeping the first message, in order."""
    seen: set[tuple[str, str | None, int | None]] = set()
    out: list[Violation] = []
    for v in violations:
        key = (v.rule, v.file, v.line)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out
