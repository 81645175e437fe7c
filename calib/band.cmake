# up_band: the error band of a prediction (band.c) and the residual table it
# is made from, profiles/bands.csv, embedded here as band_embed_csv (written
# by scripts/gen-bands.sh from `validate --bands-out`). No GSL, no I/O beyond
# the embedded text: predict, plan and validate link it through up_cli.
set(UP_BAND_CSV ${PROJECT_SOURCE_DIR}/profiles/bands.csv)
set(UP_BAND_GEN ${CMAKE_CURRENT_BINARY_DIR}/band_embed.c)
add_custom_command(
  OUTPUT ${UP_BAND_GEN}
  COMMAND ${CMAKE_COMMAND} -DOUT=${UP_BAND_GEN} -DFILE=${UP_BAND_CSV} -DSYMBOL=band_embed_csv
          -P ${PROJECT_SOURCE_DIR}/profiles/embed_text.cmake
  DEPENDS ${UP_BAND_CSV} ${PROJECT_SOURCE_DIR}/profiles/embed_text.cmake
  COMMENT "Embedding profiles/bands.csv"
  VERBATIM)
add_library(up_band STATIC ${CMAKE_CURRENT_LIST_DIR}/band.c ${UP_BAND_GEN})
target_include_directories(up_band PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(up_band PUBLIC up_model m)
