"""The HTTP client surfaces: WebSocket API, REST produce, HTTP lookup."""
