"""The skill document for coding agents (SKILL.md, the skill named `audit`), shipped with the package;
`audit skills install` copies it where an agent reads skills."""
