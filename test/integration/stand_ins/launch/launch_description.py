class LaunchDescription:
    def __init__(self, initial_entities=None):
        self.entities = list(initial_entities or [])
