"""TLS listeners, token and basic authentication, topic and subscription permissions."""
