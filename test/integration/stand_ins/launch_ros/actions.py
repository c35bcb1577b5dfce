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
        additional_env=None,
        on_exit=None,
    ):
        self.node_package, self.node_executable, self.node_name = package, executable, name
        self.arguments, self.parameters, self.remappings = arguments, parameters, remappings
        self.output, self.additional_env, self.on_exit = output, additional_env, on_exit

    def execute(self, context):
        return None
