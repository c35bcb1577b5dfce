class DeclareLaunchArgument:
    def __init__(self, name, *, default_value=None, description=""):
        self.name, self.default_value, self.description = name, default_value, description

    def execute(self, context):
        if self.name not in context.launch_configurations:
            if self.default_value is None:
                raise RuntimeError(f"launch argument {self.name!r} has no value and no default")
            context.launch_configurations[self.name] = str(self.default_value)


class OpaqueFunction:
    def __init__(self, *, function, args=None, kwargs=None):
        self.function, self.args, self.kwargs = function, args or [], kwargs or {}

    def execute(self, context):
        return self.function(context, *self.args, **self.kwargs)


class Shutdown:
    def __init__(self, *, reason="reason not given"):
        self.reason = reason


class TimerAction:
    def __init__(self, *, period, actions, cancel_on_shutdown=True):
        self.period, self.actions, self.cancel_on_shutdown = float(period), list(actions), cancel_on_shutdown
