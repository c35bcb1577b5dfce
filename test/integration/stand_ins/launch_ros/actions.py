class Node:
    def __init__(
        self,
        *,
        executable,
        package=None,
        name=None,
        arguments=None,
        parameters=None,
        remappings=None,
        output="log",
        on_exit=None,
    ):
        self.node_package, self.node_executable, self.node_name = package, executable, name
        self.arguments, self.parameters, self.remappings = arguments, parameters, remappings
        self.output, self.on_exit = output, on_exit

    def execute(self, context):
        return None
