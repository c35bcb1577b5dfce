class LaunchContext:
    def __init__(self):
        self.launch_configurations: dict[str, str] = {}
