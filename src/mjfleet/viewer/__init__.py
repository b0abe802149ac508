"""Interactive viewers of a running policy: ``web`` (viser, in the browser, headless-friendly) and ``native``
(MuJoCo's own window, needs a display). Both step the environment through :class:`session.ViewerSession`."""
