class LaunchConfiguration:
    def __init__(self, variable_name):
        self.variable_name = variable_name

    def perform(self, context):
        return context.launch_configurations[self.variable_name]
