"""`cua.trace`: traced training episodes on disk in the eval harness's format (`episodes`), drawn as filmstrips
(`filmstrip`) and sent to the user's logger (`logger`)."""
