package gitaudit

import "time"

var timeZero = time.Unix(0, 0)
