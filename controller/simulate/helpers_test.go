package simulate

import "time"

var fakeNow = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
