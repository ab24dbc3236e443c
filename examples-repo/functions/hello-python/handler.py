import humanize


def handle(event, context):
    size = int((event.get("query") or {}).get("bytes", "1048576"))
    return {
        "message": "Hello from Python!",
        "function": context["functionName"],
        "size": humanize.naturalsize(size),
    }
