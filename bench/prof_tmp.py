import asyncio, cProfile, pstats, sys, tempfile
from pathlib import Path
from bench.peers import runner_app
mode = sys.argv[1] if len(sys.argv)>1 else None
d = tempfile.mkdtemp()
one = runner_app.make(None if mode in (None,"memory") else mode, Path(d), logging_="quiet")
async def main(n):
    for _ in range(n): await one()
asyncio.run(main(30))
pr = cProfile.Profile()
pr.enable()
asyncio.run(main(200))
pr.disable()
st = pstats.Stats(pr); st.sort_stats("tottime").print_stats(45)
