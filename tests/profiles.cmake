# profiles/: builtin hardware profiles, the loader, model presets.
if(TARGET PkgConfig::CMOCKA)
  up_test(test_profiles SOURCES test_profiles.c LIBS up_profiles PkgConfig::CMOCKA LABELS unit)
  target_compile_definitions(test_profiles PRIVATE PROFILES_DIR="${PROJECT_SOURCE_DIR}/profiles/gpus")
endif()
