"""Programs the tests run as separate OS processes (python -c SCRIPT ARGS...)."""

# Append COUNT notes to req-1 of the workspace ROOT as WRITER, one ask each; with "report",
# print each note's number once it is on disk.
#     python -c APPENDER ROOT WRITER COUNT report|quiet
APPENDER = """
import sys, anyio
from teams_runtime import open_context

async def run(root, writer, count):
    async with open_context(root) as ctx:
        for n in range(count):
            await ctx.append_event("req-1", {"type": "note", "actor": writer,
                                             "summary": f"{writer}:{n}"})
            if sys.argv[4] == "report":
                print(n, flush=True)

anyio.run(run, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""
