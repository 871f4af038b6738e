from decodegap.cli import main

raise SystemExit(main())
