"""Backend adapters: observe a cluster and apply decisions to it. No policy lives here."""
