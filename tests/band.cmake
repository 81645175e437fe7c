# The error band (calib/band.h): arithmetic and coverage on synthetic residuals;
# e2e: the shipped profiles/bands.csv is what scripts/gen-bands.sh makes from
# the shipped corpus, and predict / plan show the band.
up_test(test_band SOURCES test_band.c LIBS up_band up_model LABELS unit)
up_script_test(e2e_band SCRIPT e2e_band.sh LABELS e2e)
