from sse_forensics.cli import main

main()
