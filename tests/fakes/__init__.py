"""Fakes of outside services (only those): ``chat_server.FakeChatServer``, an OpenAI-compatible HTTP server."""
