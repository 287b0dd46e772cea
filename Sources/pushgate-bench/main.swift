print("pushgate-bench: not built yet")
