"""The phone agent: SIP user agent, call sessions, audio path, pipeline and CLI."""
