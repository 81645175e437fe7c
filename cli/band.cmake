# predict's and plan's error band (calib/band.h): report.c and cmd_plan.c
# read the residual table through up_band; validate writes it (--bands-out).
target_link_libraries(up_cli PUBLIC up_band)
