"""OSWorld desktops: OSWorld's own client and evaluators over VM providers or our `local` Xvfb desktop."""
