"""Session state: the Session object, what a connection looked like, and the live registry."""
